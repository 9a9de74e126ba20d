"""The pipeline lane (complete, checked units for the parent loop) and the action gate by reversibility."""
