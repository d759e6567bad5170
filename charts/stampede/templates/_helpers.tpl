{{/* The chart's name. */}}
{{- define "stampede.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the release name, with the chart's name when it lacks it. */}}
{{- define "stampede.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "stampede.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "stampede.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Labels that select the operator's pods. */}}
{{- define "stampede.selectorLabels" -}}
app.kubernetes.io/name: {{ include "stampede.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* The operator's ServiceAccount. */}}
{{- define "stampede.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "stampede.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The operator and runner image. */}}
{{- define "stampede.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The namespaces watched, as a JSON list; empty means all. In namespaced mode an empty
     watchNamespaces means the release namespace. */}}
{{- define "stampede.watchNamespaces" -}}
{{- if .Values.watchNamespaces -}}
{{- uniq .Values.watchNamespaces | toJson -}}
{{- else if .Values.rbac.namespaced -}}
{{- list .Release.Namespace | toJson -}}
{{- else -}}
{{- list | toJson -}}
{{- end -}}
{{- end -}}

{{/* What the operator does to the objects of a LoadTest's namespace, from controller.rs:
     LoadTests are watched, deleted after spec.ttlSecondsAfterFinished and their status is
     written; the children (Job, ConfigMaps, ServiceAccount, Role, RoleBinding) are applied
     server-side (create + patch), read and deleted; failed runner pods are listed for the
     reason; Events are recorded. The runner Role (desired.rs) grants get/watch on the
     LoadTest and get/patch on ConfigMaps: RBAC's escalation check lets the operator create
     it only because it holds those verbs itself. */}}
{{- define "stampede.operatorRules" -}}
# LoadTestSchedules create LoadTests, and abort a running one (patch) for concurrencyPolicy Replace.
- apiGroups: [stampede.dev]
  resources: [loadtests]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [stampede.dev]
  resources: [loadtestschedules]
  verbs: [get, list, watch]
- apiGroups: [stampede.dev]
  resources: [loadtests/status, loadtestschedules/status]
  verbs: [get, patch, update]
# The children's owner references set blockOwnerDeletion, which (with the
# OwnerReferencesPermissionEnforcement admission plugin) needs update on the owner's finalizers.
- apiGroups: [stampede.dev]
  resources: [loadtests/finalizers, loadtestschedules/finalizers]
  verbs: [update]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, patch, delete]
# The Secret a run's `setup` writes its values to: the operator creates it empty (one per run,
# by name), lets the runners' Role patch it, and deletes it; it never reads a Secret.
- apiGroups: [""]
  resources: [secrets]
  verbs: [create, patch, delete]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, create, patch, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, create, patch, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
{{- end -}}
