"""Replicas on Redis (``[service] backend = "redis"``): the front every replica serves, the partitions it owns,
and the service that keeps its share of them (DESIGN §8)."""
