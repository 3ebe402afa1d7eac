"""The evaluation suite: does what a model builds do what was asked? Measured offline and live.

A task is a domain model (``models``), a request in a person's words, and a verifier: named
checks over the produced tree (``verify``), which never read the agent's claims. ``runner`` runs
a task through the real pipeline with any provider and returns the verifier's report and the
run's metrics. ``scripts`` holds the scripted providers that prove each verifier discriminates:
the oracle passes, the null script ("done", no tool call) and a plausible wrong one fail.

Adding a task:

1. pick (or add) a model in ``models.MODELS``; its scaffold CRUD scenario goes in ``scaffold.py``;
2. in ``tasks/<model>.py`` write a ``Task``: the request, its own ``checks`` (``verify.http`` for a
   scenario sent to the produced app, ``verify.file_holds``, ``dockerfile.parses``, or a ``Check``
   over ``Produced``), the oracle and wrong scripts (``scripts.plan/write/edit/wire/close``), and
   ``wrong_fails``, the check the wrong script must fail; add it to the module's ``TASKS``;
3. ``tests/test_eval_tasks.py`` picks it up (oracle, null, wrong); then regenerate docs/eval.md
   with ``python -m kernel_ext.eval.table``.
"""
