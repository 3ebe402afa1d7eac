"""The generated app's own environment: its ``requirements.txt`` met without touching the server's.

The app host runs the app with the server's interpreter. What the server's environment
already satisfies is used as it is; what it does not is installed, inside a one-off sandbox,
into a cached *overlay* folder (one per requirements set) that the host puts first on the
app's ``sys.path``. The server's packages are never changed, and packages are fetched only
from sources the operator allowed (a wheelhouse folder, the package index). A requirement no
allowed source can provide is one named refusal (``requirements_unmet``).

- ``requirements``: reading a ``requirements.txt`` (bounded, what it may not ask for named);
- ``plan``: which requirements the server already meets, which it does not;
- ``settings``: the operator's switches (``BESSER_APP_ENV_*``, ``BESSER_APP_WHEELHOUSE``);
- ``overlay``: building and caching an overlay in the sandbox;
- ``environment``: the one call the app host makes (``environment_for``).
"""
