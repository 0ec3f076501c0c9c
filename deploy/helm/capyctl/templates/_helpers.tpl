{{- define "capyctl.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "capyctl.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The server's Secret: the admin token and the database URL, which no other pod mounts. */}}
{{- define "capyctl.serverSecretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-server" (include "capyctl.fullname" .)) -}}
{{- end -}}

{{/* The Secret holding the metrics token, or nothing when none is set. */}}
{{- define "capyctl.metricsSecretName" -}}
{{- if .Values.metrics.existingSecret -}}
{{- .Values.metrics.existingSecret -}}
{{- else if .Values.metrics.token -}}
{{- printf "%s-metrics" (include "capyctl.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "capyctl.metricsSecretKey" -}}
{{- if .Values.metrics.existingSecret -}}
{{- .Values.metrics.existingSecretKey -}}
{{- else -}}
metrics-token
{{- end -}}
{{- end -}}

{{/* A name of this release's with the node's name in it, within the 63 characters a label or a pod's prefix allows. */}}
{{- define "capyctl.hostName" -}}
{{- printf "%s-host-%s" (include "capyctl.fullname" .root) .node | trunc 63 | trimSuffix "-" | trimSuffix "." -}}
{{- end -}}

{{/*
The GPU nodes a host agent runs on, as YAML: node name to the Secret with its host token (key
host-token), from secrets.hostTokens (a Secret the chart makes) and secrets.existingHostSecrets.
*/}}
{{- define "capyctl.hostSecrets" -}}
{{- $nodes := dict -}}
{{- range $node, $token := .Values.secrets.hostTokens -}}
{{- $_ := set $nodes $node (include "capyctl.hostName" (dict "root" $ "node" $node)) -}}
{{- end -}}
{{- range $node, $secret := .Values.secrets.existingHostSecrets -}}
{{- if hasKey $nodes $node -}}
{{- fail (printf "node %s has a token in both secrets.hostTokens and secrets.existingHostSecrets: give one" $node) -}}
{{- end -}}
{{- $_ := set $nodes $node $secret -}}
{{- end -}}
{{- toYaml $nodes -}}
{{- end -}}

{{- define "capyctl.image" -}}
{{- $image := merge (dict) .image .root.Values.image -}}
{{- printf "%s:%s" $image.repository $image.tag -}}
{{- end -}}
