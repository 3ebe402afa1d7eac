"""ipywidgets views of a run (timeline, approval cards, request reports); no JS build."""
