"""The scheduling queue (active / backoff / unschedulable) and the pods in it."""
