"""The descheduler's pure decisions: no Kopf, no API client, no clock of their own."""
