"""Schedules: records of how each operation of a DAG is computed (loop order, tiling,
parallelism, vectorization, attach points). ``tex.lower`` interprets them."""
from .auto import auto_schedule
from .axes import THREAD_TAGS, Fuse, Split, ThreadAxis, thread_axis
from .schedule import Schedule, Stage, create_schedule

__all__ = ["THREAD_TAGS", "Fuse", "Schedule", "Split", "Stage", "ThreadAxis", "auto_schedule",
           "create_schedule", "thread_axis"]
