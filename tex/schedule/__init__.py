"""Schedules: records of how each operation of a DAG is computed (loop order, tiling,
parallelism, vectorization, attach points). ``tex.lower`` interprets them.

``IterVar`` is re-exported for TVM's ``te.schedule.IterVar.Unrolled``-style constants."""
from ..ir.expr import IterVar
from .auto import auto_schedule
from .axes import THREAD_TAGS, Fuse, Singleton, Split, ThreadAxis, thread_axis
from .schedule import IterVarAttr, Schedule, Stage, create_schedule, split_parts

__all__ = ["THREAD_TAGS", "Fuse", "IterVar", "IterVarAttr", "Schedule", "Singleton", "Split",
           "Stage", "ThreadAxis", "auto_schedule", "create_schedule", "split_parts",
           "thread_axis"]
