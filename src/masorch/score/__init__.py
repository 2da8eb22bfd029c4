"""Answer extraction, scorers and reward components."""
