"""Credit assignment: segmentation, advantage estimators (registry) and credit diagnostics."""

from slca.credit.advantages import (
    compute_advantages,
    get_estimator,
    list_estimators,
    register,
)
from slca.credit.diagnostics import (
    bias_by_kind,
    credit_diagnostics,
    segment_gradient_stats,
    segment_normalisation_bias,
)
from slca.credit.segments import segment_by_tags, segment_masks, segmentations_agree

__all__ = [
    "bias_by_kind",
    "compute_advantages",
    "credit_diagnostics",
    "get_estimator",
    "list_estimators",
    "register",
    "segment_by_tags",
    "segment_gradient_stats",
    "segment_masks",
    "segment_normalisation_bias",
    "segmentations_agree",
]
