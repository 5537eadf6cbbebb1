// Scheduled jobs: create (project, agent, prompt, cron + time zone), enable/disable,
// run now, occurrences, delete.

import { api } from "../api.js";
import { confirmButton, field, fill, formatTime, h } from "../dom.js";
import { t } from "../i18n.js";

export default {
  id: "jobs",
  label: "panel.jobs",
  requires: ["/api/scheduled-jobs", "/api/scheduled-jobs/{job_id}", "/api/scheduled-jobs/{job_id}/run", "/api/projects"],
  needsThread: false,
  mount(ctx, host) {
    const error = h("p", { class: "error", role: "alert" });
    const list = h("ul", { class: "jobs" });
    const project = h("select", { name: "project_id" });
    const newProject = h("input", { name: "project_name", autocomplete: "off", placeholder: t("jobs.newProjectHint") });
    const agent = h("select", { name: "agent_slug" });
    const prompt = h("textarea", { name: "prompt", rows: "2", required: true });
    const cron = h("input", { name: "cron", value: "0 9 * * 1-5", required: true, class: "mono" });
    const zone = h("input", { name: "timezone", value: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC", required: true });
    const approval = h("select", { name: "tool_approval_mode" }, h("option", { value: "auto" }, t("approval.auto")), h("option", { value: "ask" }, t("approval.ask")));
    const form = h(
      "form",
      { class: "job-form" },
      h("h3", {}, t("jobs.new")),
      field(t("jobs.project"), project),
      field(t("jobs.newProject"), newProject),
      field(t("jobs.agent"), agent),
      field(t("jobs.prompt"), prompt),
      field(t("jobs.cron"), cron, t("jobs.cronHint")),
      field(t("jobs.timezone"), zone),
      field(t("chat.approval"), approval),
      h("button", { type: "submit", class: "primary" }, t("jobs.create")),
    );
    fill(host, h("h2", {}, t("panel.jobs")), error, list, form);
    const report = (e) => {
      error.textContent = `${e.code}: ${e.message}`;
    };

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      error.textContent = "";
      try {
        let projectId = project.value;
        if (newProject.value.trim()) {
          projectId = (await api("POST", "/api/projects", { name: newProject.value.trim() })).id;
          newProject.value = "";
        }
        await api("POST", "/api/scheduled-jobs", {
          project_id: projectId,
          agent_slug: agent.value,
          prompt: prompt.value,
          cron: cron.value.trim(),
          timezone: zone.value.trim(),
          tool_approval_mode: approval.value,
        });
        prompt.value = "";
        refresh();
      } catch (e) {
        report(e);
      }
    });

    function jobItem(job) {
      const occurrences = h("ol", { class: "occurrences", hidden: true });
      const showOccurrences = async () => {
        occurrences.hidden = false;
        try {
          const rows = await api("GET", `/api/scheduled-jobs/${job.id}/occurrences`);
          fill(
            occurrences,
            rows.length
              ? rows.map((o) =>
                  h(
                    "li",
                    {},
                    `${formatTime(o.scheduled_for)} · ${t(`jobs.trigger.${o.trigger}`)} · ${t(`jobs.occurrence.${o.status}`)}`,
                    o.run_status ? h("span", { class: "badge" }, t(`run.${o.run_status}`)) : null,
                    o.thread_id ? [" ", h("a", { href: `#/thread/${o.thread_id}` }, t("jobs.openThread"))] : null,
                    o.error ? h("span", { class: "run-error" }, ` ${o.error}`) : null,
                  ),
                )
              : h("li", { class: "empty" }, t("jobs.noOccurrences")),
          );
        } catch (e) {
          report(e);
        }
      };
      const toggle = h("input", { type: "checkbox", checked: job.enabled, id: `job-${job.id}-enabled` });
      toggle.addEventListener("change", async () => {
        try {
          await api("PATCH", `/api/scheduled-jobs/${job.id}`, { enabled: toggle.checked });
        } catch (e) {
          report(e);
        }
        refresh();
      });
      return h(
        "li",
        { class: "job", dataset: { jobId: job.id } },
        h("p", { class: "job-prompt" }, job.prompt),
        h("p", { class: "mono" }, `${job.cron} · ${job.timezone} · ${job.agent_slug}`),
        h("p", { class: "hint" }, t("jobs.next", { when: formatTime(job.next_fire_at) })),
        h("span", { class: "checkbox" }, toggle, h("label", { for: toggle.id }, t("jobs.enabled"))),
        h(
          "div",
          { class: "buttons" },
          h(
            "button",
            {
              type: "button",
              onclick: async () => {
                try {
                  await api("POST", `/api/scheduled-jobs/${job.id}/run`);
                  ctx.emit("threads-changed");
                } catch (e) {
                  report(e);
                }
                showOccurrences();
              },
            },
            t("jobs.runNow"),
          ),
          h("button", { type: "button", onclick: showOccurrences }, t("jobs.occurrences")),
          confirmButton(t("jobs.delete"), t("jobs.deleteConfirm"), async () => {
            try {
              await api("DELETE", `/api/scheduled-jobs/${job.id}`);
            } catch (e) {
              report(e);
            }
            refresh();
          }),
        ),
        occurrences,
      );
    }

    async function refresh() {
      try {
        const [jobs, projects, agents] = await Promise.all([
          api("GET", "/api/scheduled-jobs"),
          api("GET", "/api/projects"),
          api("GET", "/api/agents"),
        ]);
        fill(list, jobs.length ? jobs.map(jobItem) : h("li", { class: "empty" }, t("jobs.none")));
        fill(project, projects.map((p) => h("option", { value: p.id }, p.name)));
        fill(agent, agents.filter((a) => !a.is_subagent).map((a) => h("option", { value: a.id }, a.name)));
      } catch (e) {
        report(e);
      }
    }
    refresh();
  },
};
