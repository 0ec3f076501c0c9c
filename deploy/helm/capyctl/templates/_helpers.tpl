{{- define "capyctl.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "capyctl.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "capyctl.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-tokens" (include "capyctl.fullname" .)) -}}
{{- end -}}

{{- define "capyctl.image" -}}
{{- $image := merge (dict) .image .root.Values.image -}}
{{- printf "%s:%s" $image.repository $image.tag -}}
{{- end -}}
