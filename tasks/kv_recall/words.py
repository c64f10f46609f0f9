"""The closed vocabulary of the kv_recall task: keys and values are disjoint word sets."""

KEYS = (
    "ant bat bear bee bird boar bull calf camel cat cod colt cow crab crow deer dog dove duck eel "
    "elk emu fox frog goat gull hare hawk hen heron horse ibis jay kite lamb lark lion lynx mink "
    "mole moose moth mouse mule newt owl ox panda pig pony puma quail ram rat raven seal shark "
    "sheep snail snake swan tiger toad wolf"
).split()

VALUES = (
    "amber apple ash bark basil beach bell berry birch bread brick brook cedar chalk cheese "
    "cherry clay cliff cloud coal copper coral corn cotton cream dune dust fern flint frost "
    "glass gold grape grass gravel hail hay honey ice iron ivy jade lake leaf lemon lime maple "
    "marble meadow mint moss oak olive onion pearl pebble pine plum reed rice rose rust salt "
    "sand"
).split()

SYSTEM = "recall the value of each key"
LIST_MARK = "pairs"
QUERY_MARK = "?"
EQUALS = "="

assert len(KEYS) == 64 and len(set(KEYS)) == 64, len(KEYS)
assert len(VALUES) == 64 and len(set(VALUES)) == 64, len(VALUES)
assert not set(KEYS) & set(VALUES)
