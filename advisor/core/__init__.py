"""The shared vocabulary of the advisor's stages: bounds, errors, optional extras, locations,
the workload, units, and the throughput model that both measuring and deciding use."""
