"""What a client does locally: train, evaluate, personalize."""
