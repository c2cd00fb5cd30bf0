"""Credit assignment: segmentation, advantage estimators (registry) and credit diagnostics."""

from slca.credit.advantages import (
    compute_advantages,
    get_estimator,
    list_estimators,
    register,
)
from slca.credit.diagnostics import credit_diagnostics, segment_gradient_stats
from slca.credit.segments import segment_by_tags, segment_masks, segmentations_agree

__all__ = [
    "compute_advantages",
    "credit_diagnostics",
    "get_estimator",
    "list_estimators",
    "register",
    "segment_by_tags",
    "segment_gradient_stats",
    "segment_masks",
    "segmentations_agree",
]
