"""`roofline diagnose`: trace a PyTorch model, count, time, place on the roofline and diagnose."""
