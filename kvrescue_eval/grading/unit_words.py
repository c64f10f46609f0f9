"""Words the Qwen2.5-Math harness deletes from answers as units (its list comes from MathQA).

The harness puts each word into a regular expression unescaped (so "q ." matches "q" + any
character + ...), and adds every word again with an "s". It deletes single letters too ("a", "t",
"h", "c", "s", ...), which turns `a+1` into `+1`: mode "strict" keeps single letters.
"""

_BASE = [
    "east", "degree", "mph", "kmph", "ft", "m sqaure", " m east", "sq m", "deg", "mile", "q .",
    "monkey", "prime", "ratio", "profit of rs", "rd", "o", "gm", "p . m", "lb", "tile", "per",
    "dm", "lt", "gain", "ab", "way", "west", "a .", "b .", "c .", "d .", "e .", "f .", "g .",
    "h .", "t", "a", "h", "no change", "men", "soldier", "pie", "bc", "excess", "st", "inches",
    "noon", "percent", "by", "gal", "kmh", "c", "acre", "rise", "a . m", "th", "π r 2", "sq",
    "mark", "l", "toy", "coin", "sq . m", "gallon", "° f", "profit", "minw", "yr", "women",
    "feet", "am", "pm", "hr", "cu cm", "square", "v â € ™", "are", "rupee", "rounds", "cubic",
    "cc", "mtr", "s", "ohm", "number", "kmph", "day", "hour", "minute", "min", "second", "man",
    "woman", "sec", "cube", "mt", "sq inch", "mp", "∏ cm ³", "hectare", "more", "sec", "unit",
    "cu . m", "cm 2", "rs .", "rs", "kg", "g", "month", "km", "m", "cm", "mm", "apple", "liter",
    "loss", "yard", "pure", "year", "increase", "decrease", "d", "less", "Surface", "litre",
    "pi sq m", "s .", "metre", "meter", "inch",
]

UNIT_WORDS = _BASE + [word + "s" for word in _BASE]

_SINGLE_LETTERS = {word for word in _BASE if len(word) == 1}
# A single letter and its plural ("a", "as") can be a variable or a product of two: kept in strict mode.
STRICT_UNIT_WORDS = [w for w in UNIT_WORDS if w not in _SINGLE_LETTERS
                     and not (len(w) == 2 and w[0] in _SINGLE_LETTERS and w[1] == "s")]
