"""`tito`, the course command line."""
