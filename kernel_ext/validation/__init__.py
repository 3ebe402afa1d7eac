"""Validators that run the generated app for real (Phase 3 and the test tools) and their report."""
