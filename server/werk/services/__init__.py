"""Services decide: they own transactions and raise domain errors; routes only translate."""
