"""The closed vocabulary of the kv_recall task: numbered keys (rows) and material values."""

ROWS = 21  # rows of every list: up to 20 pairs, then rows whose value is END
KEYS = [str(row) for row in range(1, ROWS + 1)]

VALUES = (
    "amber apple ash bark basil beach bell berry birch bread brick brook cedar chalk cheese "
    "cherry clay cliff cloud coal copper coral corn cotton cream dune dust fern flint frost "
    "glass gold grape grass gravel hail hay honey ice iron ivy jade lake leaf lemon lime maple "
    "marble meadow mint moss oak olive onion pearl pebble pine plum reed rice rose rust salt "
    "sand"
).split()

SYSTEM = "recall the value of each key"
LIST_MARK = "pairs"
END = "end"  # the value of the rows after the last pair, and of the answer's last step
INSTRUCTION = "now write every pair in order"  # closes the user turn, after the list
QUERY_MARK = "?"
EQUALS = "="

assert len(VALUES) == 64 and len(set(VALUES)) == 64, len(VALUES)
assert not set(KEYS) & set(VALUES) and END not in KEYS + VALUES
