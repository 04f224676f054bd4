"""The Airflow layer: DAG building blocks, the Artifacts tab plugin, and the local Airflow launcher.

Above the stages in the layering (dags -> cockpit -> jobs -> spark, models, evaluation -> citeflow core): it
imports `jobs` and the core, and nothing below imports it. Importing it needs apache-airflow.
"""
