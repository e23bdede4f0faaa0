"""koord-manager: Kopf operators and admission webhooks for Koordinator's custom resources."""
