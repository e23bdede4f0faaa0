"""Code several plugins share, as kube-scheduler's ``framework/plugins/helper``: plugins never import
each other (checked by import-linter), they import this."""
