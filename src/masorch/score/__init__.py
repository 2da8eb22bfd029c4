"""Answer extraction, scorers and reward components."""

from masorch.score.extract import all_boxed, last_boxed
from masorch.score.masbench import (
    MasbenchScore,
    compute_score,
    masbench_reward,
    parse_ground_truth,
    parse_int,
    score_masbench,
    score_record,
)
from masorch.score.registry import get_scorer
from masorch.score.scorer import Score, Scorer

__all__ = [
    "MasbenchScore",
    "Score",
    "Scorer",
    "all_boxed",
    "compute_score",
    "get_scorer",
    "last_boxed",
    "masbench_reward",
    "parse_ground_truth",
    "parse_int",
    "score_masbench",
    "score_record",
]
