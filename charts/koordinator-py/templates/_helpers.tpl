{{/*
Chart name, truncated to 63 characters (the Kubernetes name limit).
*/}}
{{- define "koordinator-py.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: release name + chart name, truncated to 63 characters.
If the release name already contains the chart name it is used as is.
*/}}
{{- define "koordinator-py.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "koordinator-py.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Namespace of the components: .Values.namespace, else the release namespace.
*/}}
{{- define "koordinator-py.namespace" -}}
{{- default .Release.Namespace .Values.namespace }}
{{- end }}

{{/*
Selector labels (stable across upgrades; never add version labels here).
*/}}
{{- define "koordinator-py.selectorLabels" -}}
app.kubernetes.io/name: {{ include "koordinator-py.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Common labels for every object of the chart.
*/}}
{{- define "koordinator-py.labels" -}}
helm.sh/chart: {{ include "koordinator-py.chart" . }}
{{ include "koordinator-py.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/part-of: koordinator-py
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Container image of a component, "repository:tag", the tag defaulting to the chart appVersion.
Usage: {{ include "koordinator-py.image" (dict "image" .Values.scheduler.image "context" $) }}
*/}}
{{- define "koordinator-py.image" -}}
{{- printf "%s:%s" .image.repository (default .context.Chart.AppVersion .image.tag | toString) }}
{{- end }}
