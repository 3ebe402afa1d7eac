"""Leaves traces, and looks for any (test fixture: two runs in a row must not see each other's).

``POST /plant`` writes a file into the home folder and the temporary folder, sets an environment
variable, and marks a module the app host imported before any app (``json``) and the builtins.
``GET /look`` reports which of those traces it finds.
"""

import builtins
import json
import os
import tempfile

from fastapi import FastAPI

app = FastAPI(title="Trace")
MARK = "besser_trace_planted"


def _places() -> list[str]:
    return [os.path.join(os.path.expanduser("~"), MARK), os.path.join(tempfile.gettempdir(), MARK), os.path.join("/tmp", MARK)]


@app.post("/plant")
def plant():
    for place in _places():
        with open(place, "w") as handle:
            handle.write("planted")
    os.environ["BESSER_TRACE_PLANTED"] = "1"
    setattr(json, MARK, True)
    setattr(builtins, MARK, True)
    return {"planted": True}


@app.get("/look")
def look():
    return {"files": any(os.path.exists(p) for p in _places()), "env": "BESSER_TRACE_PLANTED" in os.environ,
            "module": hasattr(json, MARK), "builtins": hasattr(builtins, MARK)}
