"""Answer string normalisation: the rules of the Qwen2.5-Math harness's `strip_string`, in order.

Every rule is linear in the length of the string (the harness's regular expressions that backtrack
quadratically on long inputs are rewritten with the same matches), so a 1 MB answer cannot block.
"""

import re

from .unit_words import STRICT_UNIT_WORDS, UNIT_WORDS

# `(\d+)\.0*([^\d])`: a match can only start where a run of digits starts, so the look-behind
# gives the same matches without retrying every position inside a long run (quadratic).
_TRAILING_ZEROS_INSIDE = re.compile(r"(?<!\d)(\d+)\.0*([^\d])")
_TRAILING_ZEROS_AT_END = re.compile(r"(?<!\d)(\d+)\.0*$")
_SQRT_WITHOUT_BRACES = re.compile(r"\\sqrt(\w+)")
_VARIABLE_PREFIXES = ["x=", "y=", "z=", "x\\in", "y\\in", "z\\in", "x\\to", "y\\to", "z\\to"]
# Unit words holding "." (a regex wildcard in the harness) keep the harness's regex; the others are
# found with str.find, which is what makes a 1 MB answer take milliseconds instead of minutes.
_WILDCARD_UNITS = {word: re.compile(r"(^|\W)" + word + r"($|\W)") for word in UNIT_WORDS if "." in word}
_NON_WORD = re.compile(r"\W")


def _word_to_number(text):
    from word2number import w2n  # the harness converts "five" (and "five apples") to "5"

    try:
        return str(w2n.word_to_num(text))
    except Exception:
        return text


def _drop_trailing_text(string):
    # Harness: re.sub(r"\\text{.*?}$", "", s): from the first "\text{" to the end, if s ends with "}".
    start = string.find("\\text{")
    if start < 0 or not string.endswith("}"):
        return string
    return string[:start]


def _replace_braced(string, opening, replacement=None):
    """`opening` + text up to the first "}" -> `replacement`, or the text when it is None.

    The harness's lazy `opening.*?}` regex, left to right, without its quadratic retries."""
    out, pos = [], 0
    while True:
        start = string.find(opening, pos)
        if start < 0:
            break
        end = string.find("}", start + len(opening))
        if end < 0:
            break
        out.append(string[pos:start])
        out.append(string[start + len(opening):end] if replacement is None else replacement)
        pos = end + 1
    out.append(string[pos:])
    return "".join(out)


def _remove_word(string, word):
    r"""re.sub(r"(^|\W)" + word + r"($|\W)", r"\1\2", string): delete `word` between non-word
    characters; each match consumes the characters around it, so "a a" loses only its first "a"."""
    out, kept_until, free_from, size = [], 0, 0, len(word)
    start = string.find(word)
    while start >= 0:
        end = start + size
        before_ok = start == 0 or (start - 1 >= free_from and _NON_WORD.match(string, start - 1))
        after_ok = end == len(string) or _NON_WORD.match(string, end)
        if before_ok and after_ok:
            out.append(string[kept_until:start])
            kept_until = end
            free_from = end + 1
            start = string.find(word, free_from)
        else:
            start = string.find(word, start + 1)
    out.append(string[kept_until:])
    return "".join(out)


def _remove_units(string, words):
    for _ in range(2):
        for word in words:
            if word in _WILDCARD_UNITS:
                # the text before the first "." is literal: without it the regex cannot match
                literal = word.split(".")[0]
                stripped = _WILDCARD_UNITS[word].sub(r"\1\2", string) if literal in string else string
            else:
                stripped = _remove_word(string, word)
            if stripped != "":
                string = stripped
    return string


def _fix_fracs(string):
    """\\frac12 -> \\frac{1}{2}, \\frac1b -> \\frac{1}{b}, \\frac1{72} -> \\frac{1}{72}."""
    pieces = string.split("\\frac")
    fixed = pieces[0]
    for piece in pieces[1:]:
        fixed += "\\frac"
        if piece[:1] == "{":
            fixed += piece
            continue
        if len(piece) < 2:
            return string
        numerator, second, rest = piece[0], piece[1], piece[2:]
        if second != "{":
            fixed += "{" + numerator + "}{" + second + "}" + rest
        else:
            fixed += "{" + numerator + "}" + second + rest
    return fixed


def _fix_a_slash_b(string):
    """"3/4" -> "\\frac{3}{4}" when both sides are integers (or contain "sqrt")."""
    parts = string.split("/")
    if len(parts) != 2:
        return string
    numerator, denominator = parts
    try:
        if "sqrt" not in numerator:
            numerator = int(numerator)
        if "sqrt" not in denominator:
            denominator = int(denominator)
    except ValueError:
        return string
    if string != f"{numerator}/{denominator}":
        return string
    return "\\frac{" + str(numerator) + "}{" + str(denominator) + "}"


def strip_string(string, *, skip_unit=False, keep_single_letters=False):
    """Normalise an answer as the harness does; `keep_single_letters` is mode "strict"'s fix."""
    string = str(string).strip().replace("\n", "").rstrip(".")
    string = string.replace("\\!", "")

    string = _replace_braced(string, "\\begin{array}{", "\\begin{pmatrix}")
    string = string.replace("\\end{array}", "\\end{pmatrix}").replace("bmatrix", "pmatrix")
    string = string.replace("tfrac", "frac").replace("dfrac", "frac")
    string = string.replace("\\neq", "\\ne").replace("\\leq", "\\le").replace("\\geq", "\\ge")
    string = string.replace("\\left", "").replace("\\right", "")
    string = string.replace("\\{", "{").replace("\\}", "}")

    without_text = _drop_trailing_text(string).strip()
    if without_text != "" and without_text != string:
        string = without_text
    if not skip_unit:
        string = _remove_units(string, STRICT_UNIT_WORDS if keep_single_letters else UNIT_WORDS)

    string = string.replace("^{\\circ}", "").replace("^\\circ", "")
    string = string.replace("\\$", "").replace("$", "")
    string = string.replace("\\(", "").replace("\\)", "")
    string = _word_to_number(string)
    string = _replace_braced(string, "\\text{")
    for prefix in _VARIABLE_PREFIXES:
        string = string.replace(prefix, "")
    string = string.replace("\\emptyset", "{}").replace("(-\\infty,\\infty)", "\\mathbb{R}")
    string = string.replace("\\%", "").replace("%", "")
    string = string.replace(" .", " 0.").replace("{.", "{0.")
    # (The harness's "strip enclosing brackets if alphanumeric" test can never pass: a no-op.)
    string = string.replace("infinity", "\\infty")
    if "\\infty" not in string:
        string = string.replace("inf", "\\infty")
    string = string.replace("+\\inity", "\\infty")
    string = string.replace("and", "").replace("\\mathbf", "")
    string = _replace_braced(string, "\\mbox{", "")
    if "j" in string and "i" not in string:
        string = string.replace("j", "i")
    string = _TRAILING_ZEROS_INSIDE.sub(r"\1\2", string)
    string = _TRAILING_ZEROS_AT_END.sub(r"\1", string)
    if not string:
        return string
    if string[0] == ".":
        string = "0" + string

    sides = string.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:
        string = sides[1]
    string = _SQRT_WITHOUT_BRACES.sub(r"\\sqrt{\1}", string)
    string = string.replace(" ", "")
    string = _fix_fracs(string)
    return _fix_a_slash_b(string)
