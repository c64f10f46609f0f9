"""The closed vocabulary of the kv_recall task: numbered keys (rows), material values, animal codes, the rule.

The rule (`CODE`) maps every value to its code word: value number i (in `VALUES` order) to code word number
(5 i + 3) mod 64 (in `CODES` order), a fixed bijection with no structure a tiny model could shortcut: it is
learned as 64 facts, the "capability" a model has or lacks (docs/testbed.md).
"""

ROWS = 9  # rows of every table: up to 8 pairs, then rows whose value is END
KEYS = [str(row) for row in range(1, ROWS + 1)]

VALUES = (
    "amber apple ash bark basil beach bell berry birch bread brick brook cedar chalk cheese "
    "cherry clay cliff cloud coal copper coral corn cotton cream dune dust fern flint frost "
    "glass gold grape grass gravel hail hay honey ice iron ivy jade lake leaf lemon lime maple "
    "marble meadow mint moss oak olive onion pearl pebble pine plum reed rice rose rust salt "
    "sand"
).split()

CODES = (
    "ant bat bear bee boar bull calf camel cat cod colt cow crab crow deer dog dove duck eel elk "
    "ewe fawn finch fox frog gnat goat goose hare hawk hen heron horse jay kite lamb lark lion lynx "
    "mole moth mouse mule newt owl ox pig pony quail ram rat robin seal shark sheep slug snail swan "
    "toad trout wasp wolf wren yak"
).split()

CODE = {value: CODES[(5 * i + 3) % len(CODES)] for i, value in enumerate(VALUES)}

SYSTEM = "recall each row then write its code"
LIST_MARK = "rows"
END = "end"  # the value of the rows after the last pair, and of the answer's last step
INSTRUCTION = "now recall and code every row in order"  # closes the user turn, after the table
QUERY_MARK = "?"
EQUALS = "="
ARROW = "->"
BLANK = f"{QUERY_MARK} {ARROW} {QUERY_MARK}"  # the code line under every row of the table, to be filled in

# Every word an answer is written in (each with its leading space); with the step separator and EOS, the
# tokens a model writing answers chooses among: the testbed's counterpart of a real model's vocabulary, against
# which the detector's entropy threshold is scaled (docs/testbed.md, "Detector").
ANSWER_WORDS = (*KEYS, *VALUES, *CODES, END, EQUALS, ARROW)

assert len(VALUES) == 64 and len(set(VALUES)) == 64, len(VALUES)
assert len(CODES) == 64 and len(set(CODES)) == 64, len(CODES)
assert len(set(CODE.values())) == 64
assert not set(KEYS) & set(VALUES) and not set(CODES) & set(VALUES) and END not in KEYS + VALUES + CODES
