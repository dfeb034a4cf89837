"""The robustness suite: invalid kernels and calls give clear errors at the user's line; valid ones compile."""
