"""F11 security suite: every case asserts containment and an unchanged disk outside the run."""
