import pytest

from kernel_ext.pipeline.intent import frontend_intent


@pytest.mark.parametrize(
    "request_text",
    [
        "Build a web app for the library",
        "I want an app to manage my books",
        "a dashboard showing loans",
        "Create a student portal",
        "make a website for the shop",
        "FastAPI backend plus a React frontend",
        "give it a nice UI",
    ],
)
def test_interactive_requests_need_a_frontend(request_text):
    assert frontend_intent(request_text).needed


@pytest.mark.parametrize(
    "request_text",
    [
        "Generate a FastAPI backend for this model with JWT authentication and a Dockerfile",
        "REST API only for the library app",
        "an app, backend only please",
        "Build the app with no UI",
        "API only",
        "a headless service",
        "a FastAPI app with pagination",
        "web app without a frontend",
    ],
)
def test_headless_requests_stay_backend_only(request_text):
    assert not frontend_intent(request_text).needed


def test_modify_run_bare_app_names_the_project():
    assert frontend_intent("add a search endpoint to the app").needed
    assert not frontend_intent("add a search endpoint to the app", modify=True).needed
    assert frontend_intent("add a dashboard to the app", modify=True).needed


def test_gui_model_implies_frontend_unless_headless():
    assert frontend_intent("add pagination", has_gui_model=True).needed
    assert not frontend_intent("API only", has_gui_model=True).needed


@pytest.mark.parametrize(
    "request_text",
    [
        "Allow cross-origin requests from https://app.example.org only",
        "Allow CORS for app.example.org and dashboard.example.org",
        "Serve main_api:app with uvicorn in a Dockerfile",
        "Add GET /ui/settings/ returning the settings",
        "Rename `app` to `api` in main_api.py",
        "call app.include_router for the new router",
    ],
)
def test_words_inside_urls_names_and_code_ask_for_no_frontend(request_text):
    assert not frontend_intent(request_text).needed, frontend_intent(request_text).reason


def test_prose_around_a_url_still_counts():
    assert frontend_intent("Build a web app served at https://api.example.org").needed
    assert frontend_intent("I want an app; the API lives at /api/v1/").needed
