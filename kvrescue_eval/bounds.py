"""The one check of settings' lower bounds, with the one form of its message: the owner, the field, its
value and what is valid (the engine's and the detector's settings use it)."""


def refuse_below(owner: str, settings, bounds: dict[str, tuple[float, str]]) -> None:
    """ValueError for the first field of `settings` below its lowest value (nan too: it compares false);
    `bounds` maps a field to (lowest value, what is valid)."""
    for name, (lowest, valid) in bounds.items():
        value = getattr(settings, name)
        if not value >= lowest:
            raise ValueError(f"{owner} {name}={value!r} is invalid; valid: {valid}")
