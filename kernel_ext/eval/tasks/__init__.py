"""The registry of evaluation tasks: every task by id, in a stable order (one module per model)."""

from __future__ import annotations

from kernel_ext.eval.tasks import blog, clinic, library, library_loans, library_ops, shop, shop_more
from kernel_ext.eval.tasks.base import Task

TASKS: dict[str, Task] = {t.id: t for module in (library, library_ops, library_loans, shop, shop_more, clinic, blog) for t in module.TASKS}


def get_task(task_id: str) -> Task:
    try:
        return TASKS[task_id]
    except KeyError:
        raise KeyError(f"no evaluation task {task_id!r}; known: {', '.join(TASKS)}") from None


__all__ = ["TASKS", "Task", "get_task"]
