"""Training the orchestrator with GRPO (TRL, verl); heavy dependencies load lazily."""
