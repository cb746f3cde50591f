# Source from a shell before running services or tools by hand:  . infra/env.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export PREFECT_SERVER_ANALYTICS_ENABLED=false MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=1
