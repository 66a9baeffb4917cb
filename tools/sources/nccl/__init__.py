"""NCCL: its own INFO/WARN lines, and the rank → node map its communicator init lines state."""
