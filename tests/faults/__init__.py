"""F11 fault and soak tests: kills, drops, full disks, and nothing leaked."""
