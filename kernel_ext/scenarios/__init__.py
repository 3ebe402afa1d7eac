"""Authored, runnable experiments (disposable files, real Executor); not live-model runs."""
