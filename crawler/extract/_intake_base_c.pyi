"""Types of `_intake_base_c.pyx`: the compiled intake's base, as the compiled extractor sees it."""

class IntakeBase:
    all_links: bool
    found: int
    limit: int
