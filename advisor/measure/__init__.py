"""What is there: the data set's profile, the hardware, and the live trial."""
