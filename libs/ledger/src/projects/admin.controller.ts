import { Body, Controller, Delete, Get, Param, Patch, Post, UseGuards } from '@nestjs/common';
import { idSchema } from '@tollgate/contracts';
import { AuthGuard, Documented, RequireAdminToken, ZodPipe } from '@tollgate/platform';
import type { z } from 'zod';
import {
  createKeySchema,
  createProjectSchema,
  keyListResponse,
  keyResponse,
  keyRevokedResponse,
  projectResponse,
  projectSettingsSchema,
} from './projects.schemas';
import { ProjectsService } from './projects.service';

/** Operator routes, authorized by TOLLGATE_ADMIN_TOKEN. */
@Controller('v1/admin/projects')
@UseGuards(AuthGuard)
@RequireAdminToken()
export class AdminController {
  constructor(private readonly projects: ProjectsService) {}

  @Post()
  @Documented({
    summary: 'Create a project',
    tag: 'admin',
    auth: 'admin-token',
    errors: ['conflict'],
    body: createProjectSchema,
    response: projectResponse,
  })
  create(@Body(new ZodPipe(createProjectSchema)) body: z.infer<typeof createProjectSchema>) {
    return this.projects.createProject(body);
  }

  @Patch(':projectId')
  @Documented({
    summary: "Change a project's money settings: cost unit, exchange rates, what unpriced steps cost",
    tag: 'admin',
    auth: 'admin-token',
    errors: ['not_found'],
    body: projectSettingsSchema,
    response: projectResponse,
  })
  updateSettings(
    @Param('projectId', new ZodPipe(idSchema, 'projectId')) projectId: string,
    @Body(new ZodPipe(projectSettingsSchema)) body: z.infer<typeof projectSettingsSchema>,
  ) {
    return this.projects.updateSettings(projectId, body);
  }

  @Post(':projectId/keys')
  @Documented({
    summary: 'Create an API key for a project (the key is shown once)',
    tag: 'admin',
    auth: 'admin-token',
    errors: ['not_found'],
    body: createKeySchema,
    response: keyResponse,
  })
  createKey(
    @Param('projectId', new ZodPipe(idSchema, 'projectId')) projectId: string,
    @Body(new ZodPipe(createKeySchema)) body: z.infer<typeof createKeySchema>,
  ) {
    return this.projects.createKey(projectId, body);
  }

  @Get(':projectId/keys')
  @Documented({
    summary: "List a project's keys (never the keys themselves)",
    tag: 'admin',
    auth: 'admin-token',
    response: keyListResponse,
  })
  listKeys(@Param('projectId', new ZodPipe(idSchema, 'projectId')) projectId: string) {
    return this.projects.listKeys(projectId);
  }

  @Delete(':projectId/keys/:keyId')
  @Documented({
    summary: 'Revoke a key; it stops working at once',
    tag: 'admin',
    auth: 'admin-token',
    errors: ['not_found'],
    response: keyRevokedResponse,
  })
  revokeKey(
    @Param('projectId', new ZodPipe(idSchema, 'projectId')) projectId: string,
    @Param('keyId', new ZodPipe(idSchema, 'keyId')) keyId: string,
  ) {
    return this.projects.revokeKey(projectId, keyId);
  }
}
