"""Recovery: the share of eviction's accuracy loss that rescue wins back, the paper's headline measure.

    recovery = (A_rescue - A_bon) / (A_full - A_bon)

A_bon is evicted best-of-N (the loss), A_full the full-KV base (no loss). Undefined (None) when A_full = A_bon:
eviction lost nothing. Keyword-only, so that no caller can swap the baselines.
"""


def recovery(*, rescue, bon, full):
    return None if full == bon else (rescue - bon) / (full - bon)
