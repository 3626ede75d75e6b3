"""Planning: from config.json, the index and the safetensors headers alone, decide every byte of the derivative."""

from .model import Dim, PadOp, Plan, ShardPlan, TensorPlan
from .planner import make_plan

__all__ = ["Dim", "PadOp", "Plan", "ShardPlan", "TensorPlan", "make_plan"]
