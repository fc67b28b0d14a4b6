"""What to do: the decision-flow rules and the recommendation assembled from them."""
