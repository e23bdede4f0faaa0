"""Koordinator's label, annotation and extended-resource keys, with typed parsers for their values.

One module per feature (api-reference section 2):

- ``gang``: gang / coscheduling keys, mode and match-policy fallbacks, groups, network-topology index.
- ``networktopology``: the gang network-topology-spec and built-in topology layer names.
- ``quota``: elastic quota labels and ResourceList annotations, the asymmetric boolean labels.
- ``reservation``: reservation affinity, exact-match, allocated, restricted options, owners.
- ``device``: device-share resource names, device-allocated / allocate-hint / joint-allocate,
  GPU partitions, vendor labels and vendor adapter outputs.
- ``loadaware``: usage thresholds and load-estimation annotations.
- ``numa``: NUMA topology spec, resource spec/status, CPU topology and node reservation.
- ``priority``: koord-prod/mid/batch/free classes and the sub-priority label.
- ``qos``: Koordinator QoS classes.
- ``colocation``: batch/mid extended resources, extended-resource-spec, replace-resources.
- ``preemption``: disable-preemptible, preemption policy, eviction cost, soft eviction.
- ``scheduler``: scheduler name conventions and the scheduling hint.
- ``qosannotations``: the remaining public keys (resctrl, cpuQOS, oom-score-adj, eviction, node ratios).
- ``defrag``: ours: koord-descheduler's gang defragmentation plan (Reservation label, PodGroup annotation).

Every parser reports a malformed value as :class:`apis.errors.InvalidAnnotation` through the shared
helpers in ``apis.extension._annotation``.
"""
