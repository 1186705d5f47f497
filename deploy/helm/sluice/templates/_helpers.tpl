{{- define "sluice.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sluice.labels" -}}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "sluice.secretName" -}}
{{- .Values.existingSecret | default (include "sluice.fullname" .) -}}
{{- end -}}

{{/* The configuration file: the values' config plus the listen addresses,
data dir and shutdown timings the chart owns. */}}
{{- define "sluice.config" -}}
{{- $own := dict "http_addr" (printf "0.0.0.0:%v" .Values.service.httpPort) "grpc_addr" (printf "0.0.0.0:%v" .Values.service.grpcPort) "data_dir" "/var/lib/sluice" "drain_delay" (printf "%vs" .Values.drainDelaySeconds) "shutdown_timeout" (printf "%vs" .Values.shutdownTimeoutSeconds) -}}
{{- toYaml (merge $own .Values.config) -}}
{{- end -}}
