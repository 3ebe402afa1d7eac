"""F11 fuzzing: hypothesis-generated arguments for every tool of the default catalog."""
