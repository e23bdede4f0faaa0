"""Collectors: each samples one kind of usage into the metric cache once per collect interval.

A collector that fails (a missing cgroup file, permission denied, a kernel without the file) is
logged once and skipped for that round; it never stops the others or koordlet
(:class:`koordlet.collectors.base.CollectorSet`).
"""
